"""The broker's Service Bus connections, one concern a module (:mod:`.connection` lists
them); :class:`~amqplink.broker.sbserver.ServiceBusHost` makes one per client connection."""
