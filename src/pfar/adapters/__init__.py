"""Adapters: turn the outside world into events and deliver the owner's messages."""
