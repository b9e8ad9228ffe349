"""Service Bus's wire contract, shared by the client and the broker (neither imports the other).

:mod:`.sas` signs, parses and verifies SAS tokens; :mod:`.lock_token` turns delivery-tags
into lock tokens; :mod:`.annotations` names the ``x-opt-*`` message annotations and the
dead-letter properties; :mod:`.conditions` the AMQP error conditions Service Bus uses;
:mod:`.nodes` the ``$cbs``/``$management`` nodes, their operations and the ``com.microsoft:``
link properties; :mod:`.formats` the batch message-format, the ping and .NET ticks
(docs/protocol.md). :mod:`amqplink.servicebus` (the client) and
:mod:`amqplink.broker` both import these; this package imports only the codec.
"""
