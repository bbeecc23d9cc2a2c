"""Transformations over irkernel IR. Imports irkernel only (never runtime).

Importing this package registers every built-in pass with
``irkernel.transform.register_pass``.
"""
