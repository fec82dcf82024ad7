"""Scripted A2A 1.0 demo agent imitating the iac-code kernel (a separate process; see README.md).

Public entry points: ``agui_bridge.demo.server`` (``create_demo_app``, ``run_demo_agent``,
``token_from_env``), ``agui_bridge.demo.testing.running_demo_agent`` and the pure
``agui_bridge.demo.scenarios``. Nothing here is imported by the bridge itself.
"""
