from click.testing import CliRunner

from orbit_cli.main import cli


def test_version_flag_prints_the_release() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == "orbit 0.5.0\n"
