"""What the deployment offers: applications (``applications``), the flows they run
(``flows``) and the themes of their pages (``themes``)."""

from identityctl.services.catalog import applications, flows, themes

__all__ = ["applications", "flows", "themes"]
