"""The store contract: one suite of test methods every journal backend must pass."""

import pytest

# the contract's methods live in a module pytest does not collect by itself
pytest.register_assert_rewrite("tests.contract.store_contract")
