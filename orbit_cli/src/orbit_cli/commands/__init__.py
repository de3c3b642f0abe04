"""One module per `orbit` command."""
