"""Entry points of scprof (the command line and the demo): the end of the data flow."""
