"""Flow executions: starting and stepping them (``execution``), what one request to an
execution works with (``step``), the executors each TASK_EXECUTION node runs
(``executors/``, one module per family) and the table naming them (``registry``).

The graph walk itself is the pure ``identityctl.flow.engine``; the executors call the
accounts room for what they prove, so a flow sign-in proves what the atomic API proves.
"""
