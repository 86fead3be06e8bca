"""What the deployment sends: e-mail (``mail``), webhooks (``webhooks``) and the outbox
worker that delivers both and back-channel logouts once, across restarts and instances
(``outbox``).
"""
