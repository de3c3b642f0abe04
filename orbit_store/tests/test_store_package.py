import orbit_store


def test_package_reports_the_release() -> None:
    assert orbit_store.__version__ == "0.5.0"
