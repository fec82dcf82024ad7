"""Durable per-thread state: pure model/keys/owner, plus the filelock-backed `store`.

Deliberately re-exports nothing, so importing the pure modules never pulls in filelock.
"""
