"""`orbit lsp`: the language server on stdin and stdout (orbit_cli.lsp)."""

from __future__ import annotations

import click


@click.command(
    "lsp", short_help="Run the language server (LSP over stdio), used by editor extensions"
)
def cli() -> None:
    """Run the language server (LSP over stdio), used by editor extensions."""
    from orbit_cli.lsp.server import serve

    serve()
