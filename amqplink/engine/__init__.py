"""amqplink.engine"""
