"""Driving /flow/execute like the hosted UI does, with a software authenticator."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import requests

from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator

ASSERTION_INPUTS = ("clientDataJSON", "authenticatorData", "signature", "userHandle")


def credential_inputs(credential: dict[str, Any]) -> dict[str, str]:
    """The flat passkey inputs of spec 2.6 from a PublicKeyCredential JSON."""
    inputs = {"credentialId": credential["id"]}
    for name, value in credential["response"].items():
        if name in (*ASSERTION_INPUTS, "attestationObject") and value is not None:
            inputs[name] = value
    if credential["response"].get("transports"):  # as the hosted page sends them
        inputs["transports"] = ",".join(credential["response"]["transports"])
    return inputs


@dataclass
class FlowClient:
    service: Service
    application_id: str
    authenticator: SoftAuthenticator = field(default_factory=SoftAuthenticator)
    execution_id: str = ""
    step: dict[str, Any] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return self.service.config.passkey.allowed_origins[0]

    def call(self, body: dict[str, Any], **kwargs: Any) -> requests.Response:
        response = self.service.post("/flow/execute", body, **kwargs)
        if response.status_code == 200:
            self.step = response.json()
            self.execution_id = self.step["executionId"]
        return response

    def start(self, flow_type: str = "AUTHENTICATION") -> dict[str, Any]:
        response = self.call({"applicationId": self.application_id, "flowType": flow_type})
        assert response.status_code == 200, response.text
        return self.step

    def act(self, action: str, **inputs: str) -> dict[str, Any]:
        response = self.call({"executionId": self.execution_id, "action": action,
                              "inputs": inputs})
        assert response.status_code == 200, response.text
        return self.step

    def additional(self, name: str) -> dict[str, Any]:
        return json.loads(self.step["data"]["additionalData"][name])

    def use_passkey(self, action: str = "passkey_verify", **tamper: Any) -> dict[str, Any]:
        credential = self.authenticator.get(self.additional("passkeyChallenge"),
                                            origin=tamper.pop("origin", self.origin), **tamper)
        return self.act(action, **credential_inputs(credential))

    def create_passkey(self, action: str = "passkey_register", **inputs: str) -> dict[str, Any]:
        credential = self.authenticator.create(self.additional("passkeyCreationOptions"),
                                               origin=self.origin)
        return self.act(action, **credential_inputs(credential), **inputs)
