"""`python -m mcp_server.faces.cli`: the command line, as the `automl-setup` script runs it."""

import sys

from mcp_server.faces.cli.main import main

sys.exit(main())
