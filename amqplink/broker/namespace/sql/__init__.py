"""Subscription rules and Service Bus's SQL filter language, one module a step:
:mod:`.lexer` (tokens), :mod:`.parser` (tokens to evaluation closures, once per rule),
:mod:`.evaluate` (the closures, three-valued), :mod:`.like` (``[NOT] LIKE`` under a step
budget), :mod:`.filter` (``SqlFilter`` and ``SqlRuleAction``, compiled once, evaluated per
message) and :mod:`.rules` (which rules of a subscription match a message: true, false,
correlation and SQL filters).

Nothing is imported here: :mod:`amqplink.broker.config` compiles SQL rules with
:mod:`.filter`, and :mod:`.rules` reads the configuration's types, so each is imported by
its own path.
"""
