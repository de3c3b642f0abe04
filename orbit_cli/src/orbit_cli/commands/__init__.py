"""One module per `orbit` command; each exposes its click command as `cli`."""
