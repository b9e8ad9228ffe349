"""The Service Bus management API's wire format (Atom XML), shared by the broker and the client.

:mod:`.document` writes Atom entries, feeds and error documents and formats times and
durations; :mod:`.xmlsafe` parses bodies without DTDs; :mod:`.values` reads and writes
the typed key-values of rules (``KeyValueOfstringanyType``); :mod:`.authorization` an entity's
shared access rules (``<AuthorizationRules>``). Neither side imports the other:
the broker serves these documents, :mod:`amqplink.servicebus.management` sends and reads them.
"""
