"""Spark 4 finds the ``servicebus`` data source through this module, with no call to make.

Spark 4 looks for Python data sources on its own the first time a session needs one: a
Python worker imports every top-level module whose name starts with ``pyspark_`` and
registers its ``DefaultSource`` under ``DefaultSource.name()``
(``pyspark/sql/worker/lookup_data_sources.py``), for every session of the JVM and every
thread. So with amqplink installed (or shipped with ``--py-files``, see docs/spark.md),
``spark.read.format("servicebus")``, ``df.write.format("servicebus")`` and their streaming
forms work without ``amqplink.spark.register(spark)`` (which still registers it, and the
alias ``amqplink``, for those who want it explicit).

This module stays tiny: the lookup imports it in every Spark application, whether or not
the application uses Service Bus.
"""

from __future__ import annotations

from amqplink.spark.datasource import ServiceBusDataSource as DefaultSource

__all__ = ["DefaultSource"]
