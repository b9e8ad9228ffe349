"""Harnesses against AMQP 1.0 peers no one here wrote, and side-by-side benchmarks."""
