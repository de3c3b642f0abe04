import orbit_server


def test_package_reports_the_release() -> None:
    assert orbit_server.__version__ == "0.5.0"
