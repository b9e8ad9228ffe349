"""Real AMQP 1.0 peers started on 127.0.0.1 by the tests and benchmarks themselves.

Each module installs what its peer needs (pip or apt-get) when it is missing, starts
it on a free loopback port, and stops it on exit; a peer that cannot start raises,
it never skips.
"""
