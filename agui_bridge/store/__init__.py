"""Durable per-thread state: pure model/keys/owner, plus the flock-guarded `store`.

Deliberately re-exports nothing, so importing the pure modules never starts the writer or touches a lock.
"""
