"""The official SDK's own management tests (azure-servicebus's source distribution, ``tests/mgmt_tests``)
run against the embedded broker: :mod:`.shim` is the pytest plugin that stands in for the Azure
SDK's test tooling in live mode, :mod:`.test_sdk_mgmt_suite` runs them (sdk tier)."""
