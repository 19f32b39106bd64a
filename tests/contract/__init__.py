"""The store contract: one suite of tests every journal backend must pass.

Each `test_<family>.py` states the contract of a family's verbs, through those verbs
alone; `conftest.py` runs every test once per backend (backends.py), and
`test_every_verb.py` checks that each verb of the protocol has its test (verbs.py).

Leases for many kernels (DESIGN.md "Many kernels": an owner kernel, an expiry and an
epoch per task, renewed by a heartbeat; claiming with FOR UPDATE SKIP LOCKED; writes
fenced by the epoch) are further contract tests to add when the store has them, e.g.
`test_a_claim_skips_tasks_another_kernel_holds`,
`test_an_expired_lease_is_claimed_with_a_new_epoch` and
`test_a_write_under_an_old_epoch_is_refused`; a backend that cannot share a journal
between kernels (SQLite: one kernel per home) skips them through an attribute of its
`Backend`, as `commits_made` lets a backend without a commit counter skip that check.
"""

import pytest

# helpers the tests call assert too: rewritten, so that a failure says what differed
pytest.register_assert_rewrite("tests.contract.helpers", "tests.contract.verbs")
