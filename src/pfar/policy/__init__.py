"""Policy: what needs the owner's approval, and what must never be stored in the clear."""

from .approvals import ApprovalNeed, ApprovalRule, approval_needed
from .redact import Redactor

__all__ = ["ApprovalNeed", "ApprovalRule", "Redactor", "approval_needed"]
