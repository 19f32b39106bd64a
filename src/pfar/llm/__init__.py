"""LLM providers behind one interface."""

from .provider import LLMRequest, LLMResponse, Provider
from .scripted import ScriptedProvider

__all__ = ["LLMRequest", "LLMResponse", "Provider", "ScriptedProvider"]
