"""One module per ``hetlapack`` subcommand."""
