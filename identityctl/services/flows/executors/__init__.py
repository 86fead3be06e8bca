"""The flow executors, one module per family: ``basic`` (password, identify, attributes,
provisioning, authorization, assertion), ``passkey``, ``email``, ``recovery`` and
``federation``. Each gets the :class:`~identityctl.services.flows.step.StepRequest` of the
request that runs it and answers a ``flow.engine.TaskOutcome``; ``flows/registry.py`` names
them.
"""
