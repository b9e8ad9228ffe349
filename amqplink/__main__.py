"""``python -m amqplink``: the ``amqplink`` command."""

import sys

try:
    from amqplink.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the command: no traceback
    sys.exit(130)

sys.exit(main())
