import orbit_core


def test_package_reports_the_release() -> None:
    assert orbit_core.__version__ == "0.5.0"
