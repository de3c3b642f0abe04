import orbit_lang


def test_package_reports_the_release() -> None:
    assert orbit_lang.__version__ == "0.5.0"
