"""Users, organisation units and user types (``users``), and roles (``roles``): who exists
and what they may do. The lowest room but one: only the shared modules of services/ are
below it.
"""
