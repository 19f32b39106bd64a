"""Policy: what needs the owner's approval, and what must never be stored in the clear."""

from .approvals import ApprovalNeed, ApprovalRule, approval_needed
from .redact import RedactingFilter, Redactor

__all__ = ["ApprovalNeed", "ApprovalRule", "RedactingFilter", "Redactor", "approval_needed"]
