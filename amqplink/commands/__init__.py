"""The sub-commands of the ``amqplink`` command, one module each."""
