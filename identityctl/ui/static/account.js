// The account page: a public client of identityctl itself (authorization code + PKCE, by
// client-page.js), then the person's profile and e-mail address, passkeys, devices and
// applications they are signed in on, password and consents through /account/api. What an
// action did (or why it failed) is said right by its control, in a live region, and cleared
// by the next action. The access token lives in memory only; a reload signs in again, which
// the browser's session answers without a page. /account/enrol is the other device's page: it
// adds a passkey with the one-time link in its fragment. /device is where a person approves
// a device's sign-in (RFC 8628): the code it shows, then a sign-in, then Allow or Deny.
// No framework, no inline code.
"use strict";

(() => {
  const t = window.identityctlText;
  const root = document.getElementById("account");
  if (!root) return;
  const page = root.dataset;
  const $ = (id) => document.getElementById(id);
  const content = $("content");
  const { creationOptions, credentialJSON, signal } = window.identityctlWebAuthn;
  const {
    element, button, whole, when, section, showError, setStatus, feedback, say, clearFeedback,
    Refused, signInFor, authenticator,
  } = window.identityctlClientPage;
  const PENDING = "identityctl-account-pkce";
  const DEVICE_CODE = "identityctl-device-code";
  let accessToken = "";
  let idToken = "";

  const TEXT = {
    sign_in_too_old: "For this change, sign in again first.",
    last_credential: "This is your only way to sign in. Add another passkey or a password " +
      "first.",
    weak_password: "Choose a longer or less common password (at least 8 characters, not " +
      "your username).",
    link_used: "This link was used already. Ask for a new one: on your account page if " +
      "you made it, or from the person who invited you.",
    user_code_invalid: "That code is not valid, or it has expired. Check the code your " +
      "device shows, then try again.",
    too_many_attempts: "Too many wrong codes. Wait a few minutes, then try again.",
    NotAllowedError: "The passkey request was cancelled or timed out.",
    InvalidStateError: "This device already has a passkey for your account.",
    invalid_email: "Enter one e-mail address, like name@example.com.",
    email_not_configured: "This service sends no e-mail. Ask an administrator to confirm " +
      "your address.",
    too_many_codes: "Too many codes were sent. Wait an hour, then try again.",
    email_code_invalid: "That is not the code we sent. Check it and try again.",
    email_code_expired: "This code has expired. Send a new one.",
    email_code_not_sent: "There is no code to enter any more. Send a new one.",
    device_not_found: "You are no longer signed in on that device.",
    authenticator_not_allowed: "This security key is not allowed here. Use one of the keys " +
      "your organisation approved.",
    invalid_totp_code: "That code is not right, or was used already. Enter the code your " +
      "app shows now.",
    totp_not_pending: "There is nothing to confirm any more. Start again.",
    passwords_not_allowed: "Passwords are not used here. Sign in with a passkey.",
    enrolment_link_missing: "This page needs the link from your account page.",
  };
  // A passkey's name: said before the try, and again when a name breaks it.
  const NAME_RULE = "A name has 1 to 64 characters.";

  // --- calls to /account/api ----------------------------------------------------------------

  async function call(method, path, body, bearer = true) {
    const headers = { "Content-Type": "application/json" };
    if (bearer) headers.Authorization = `Bearer ${accessToken}`;
    const response = await fetch(page.apiUrl + path, { method, headers, credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body) });
    const data = response.status === 204 ? {} : await response.json().catch(() => ({}));
    if (!response.ok) throw new Refused(data, response.status);
    return data;
  }

  function messageFor(failure) {
    const known = TEXT[failure.code] || TEXT[failure.name];
    return known ? t(known) : t("Something went wrong. Try again.");
  }

  // --- signing in (the page's token is for /account/api) -------------------------------------

  const { signIn, returned, redeem } = signInFor(page, { key: PENDING });

  // Runs an action of part ``slot``; a failure is said there (changes that need a recent
  // sign-in offer it when the service asks for one).
  async function guarded(action, slot) {
    clearFeedback();
    try {
      await action();
    } catch (failure) {
      const where = slot ? say(slot, messageFor(failure), true) : showError(messageFor(failure));
      if (failure.code === "sign_in_too_old") {
        (where || $("error")).append(" ",
          button(t("Sign in again"), () => signIn({ prompt: "login" })));
      }
    }
  }

  // --- the account ----------------------------------------------------------------------------

  function table(headings, rows) {
    if (!rows.length) return element("p", { class: "status" }, t("None."));
    return element("table", {},
      element("thead", {}, element("tr", {}, ...headings.map((h) => element("th", {}, h)))),
      element("tbody", {}, ...rows.map((cells) => element("tr", {},
        ...cells.map((cell, index) => element("td", { "data-label": headings[index] },
          cell))))));
  }

  // The passkey is named after the authenticator that made it (by the service).
  async function addPasskeyHere() {
    const started = await call("POST", "/passkeys/start", {});
    say("passkeys", t("Follow your device's prompt to create a passkey…"));
    const credential = await navigator.credentials.create(
      { publicKey: creationOptions(started.publicKeyCredentialCreationOptions) });
    await call("POST", "/passkeys/finish", { sessionToken: started.sessionToken,
      publicKeyCredential: credentialJSON(credential) });
    await render();  // the list shows the change when the feedback says it
    say("passkeys", t("Passkey added."));
  }

  // Renaming, in a dialog of the page's own look: the rule is said before the try, and a
  // name the service refuses is said in the dialog.
  function renamePasskey(key) {
    const field = element("input", { id: "passkey-name", required: "", autocomplete: "off",
      "aria-describedby": "passkey-name-rule passkey-name-feedback" });
    field.value = key.name;
    const problem = element("p", { id: "passkey-name-feedback", class: "feedback",
      role: "status", "aria-live": "polite" });
    const dialog = element("dialog", { class: "account-dialog",
      "aria-labelledby": "passkey-name-title" });
    const form = element("form", { method: "dialog" },
      element("h2", { id: "passkey-name-title" }, t("Rename passkey")),
      element("label", { for: "passkey-name" }, t("New name")),
      element("p", { id: "passkey-name-rule", class: "hint" }, t(NAME_RULE)), field, problem,
      element("p", { class: "actions" }, element("button", { type: "submit" }, t("Save")),
        button(t("Cancel"), () => dialog.close(), true)));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      problem.textContent = "";
      problem.classList.remove("error");
      try {
        await call("PATCH", `/passkeys/${encodeURIComponent(key.credentialId)}`,
          { name: field.value });
      } catch (failure) {
        problem.textContent = ["invalid_field", "missing_field"].includes(failure.code)
          ? t(NAME_RULE) : messageFor(failure);
        problem.classList.add("error");
        return;
      }
      dialog.close();
      await render();
      say("passkeys", t("Passkey renamed."));
    });
    dialog.addEventListener("close", () => dialog.remove());
    dialog.append(form);
    root.append(dialog);
    dialog.showModal();
    field.select();
  }

  async function linkForAnotherDevice(where) {
    const link = await call("POST", "/passkeys/link", {});
    where.replaceChildren(
      element("p", {}, t("On your other device, scan this code or open the link. It works " +
        "once, until {time}.", { time: new Date(link.expiresAt * 1000).toLocaleTimeString(
          document.documentElement.lang) })),
      element("img", { src: link.qrCode, alt: t("QR code of the link"), width: "180",
        height: "180" }),
      element("p", {}, element("a", { href: link.url, class: "link" }, link.url)));
  }

  // The built-in application is this page, named in the person's language.
  function applicationName(clientId, name) {
    return clientId === page.clientId ? t("Your account") : name;
  }

  // On every drawing (the page's load, after a delete): the person's devices drop the
  // passkeys this service no longer has and show the names it has now (an administrator may
  // have renamed the account).
  function tellDevices(passkeys) {
    const { rpId, userId, name, displayName } = passkeys.webauthn;
    signal("signalAllAcceptedCredentials", { rpId, userId,
      allAcceptedCredentialIds: passkeys.passkeys.map((key) => key.credentialId) });
    signal("signalCurrentUserDetails", { rpId, userId, name, displayName });
  }

  async function render() {
    const [profile, passkeys, devices, sessions, consents] = await Promise.all([
      call("GET", "/profile"), call("GET", "/passkeys"), call("GET", "/browser-sessions"),
      call("GET", "/sessions"), call("GET", "/consents")]);
    tellDevices(passkeys);
    const another = element("div", { id: "another-device" });
    const passwordField = element("input", { id: "new-password", type: "password",
      autocomplete: "new-password", required: "" });
    const passwordForm = element("form", { id: "password-form" },
      element("label", { for: "new-password" }, t("New password (at least 8 characters)")),
      passwordField, element("button", { type: "submit" },
        profile.hasPassword ? t("Change password") : t("Set a password")),
      feedback("password"));
    passwordForm.addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(async () => {
        await call("PUT", "/password", { password: passwordField.value });
        passwordField.value = "";
        say("password", t("Password saved."));
      }, "password");
    });
    content.replaceChildren(...[
      section(t("Profile"), element("dl", {},
        element("dt", {}, t("Username")), element("dd", { id: "username" }, profile.username),
        element("dt", {}, t("Roles")), element("dd", {}, (profile.roles || []).join(", ") || "—"))),
      section(t("E-mail address"), emailPart(profile)),
      section(t("Passkeys"),
        table([t("Name"), t("Authenticator"), t("Added"), t("Last used"), t("Actions")],
          passkeys.passkeys.map((key) => [
            key.name, authenticator(key), when(key.createdAt), when(key.lastUsedAt),
            element("span", { class: "actions" },
              button(t("Rename"), () => guarded(async () => renamePasskey(key), "passkeys"), true),
              button(t("Delete"), () => guarded(async () => {
                if (!window.confirm(t("Delete the passkey \"{name}\"?", { name: key.name }))) {
                  return;
                }
                await call("DELETE", `/passkeys/${encodeURIComponent(key.credentialId)}`);
                await render();
                say("passkeys", t("Passkey deleted."));
              }, "passkeys"), true))])),
        element("p", { class: "actions" },
          button(t("Add a passkey on this device"), () => guarded(addPasskeyHere, "passkeys")),
          button(t("Add a passkey on another device"),
            () => guarded(() => linkForAnotherDevice(another), "passkeys"), true)),
        feedback("passkeys"), another),
      section(t("Where you are signed in"), devicesPart(devices.browserSessions)),
      section(t("Signed in to"), table([t("Application"), t("Since"), t("Last used"), t("From"), t("Actions")],
        sessions.sessions.map((entry) => [applicationName(entry.clientId, entry.application),
          when(entry.signedInAt), when(entry.lastUsedAt), whole(entry.address),
          button(t("Sign out"), () => guarded(async () => {
            await call("DELETE", `/sessions/${encodeURIComponent(entry.id)}`);
            await render();
            say("sessions", t("Signed out of {application}.", { application: entry.application }));
          }, "sessions"), true)])), feedback("sessions")),
      // Where passkeys only are allowed, neither a password nor its second step is offered.
      profile.passwordsAllowed ? section(t("Password"), passwordForm) : null,
      profile.passwordsAllowed && profile.hasPassword
        ? section(t("Authenticator app"), totpPart(profile)) : null,
      section(t("Recovery codes"), recoveryCodes(profile)),
      section(t("Applications you allowed"), table([t("Application"), t("May"), t("Actions")],
        consents.consents.map((grant) => [grant.application,
          element("ul", { class: "plain" }, ...grant.scopeDescriptions.map(
            (description) => element("li", {}, t(description)))),
          button(t("Revoke"), () => guarded(async () => {
            await call("DELETE", `/consents?${new URLSearchParams({ clientId: grant.clientId })}`);
            await render();
            say("consents", t("{application} no longer has access.",
              { application: grant.application }));
          }, "consents"), true)])), feedback("consents"))].filter(Boolean));
  }

  // --- the e-mail address: confirm it, or change it, with a code sent there ----------------

  function emailPart(profile) {
    const address = (profile.attributes || {}).email;
    const part = element("div", { id: "email" });
    const state = address ? element("p", {}, element("span", { id: "email-address" }, address),
      " ", element("span", { class: profile.emailVerified ? "tag" : "tag warn" },
        profile.emailVerified ? t("confirmed") : t("not confirmed")))
      : element("p", {}, t("No e-mail address yet."));
    const forms = element("div", {});
    const show = (form) => {
      forms.replaceChildren(form);
      form.querySelector("input").focus();
    };
    const actions = element("p", { class: "actions" },
      address && !profile.emailVerified ? button(t("Confirm"), () => guarded(async () => {
        show(codeForm(await sendCode(address)));
      }, "email")) : null,
      button(address ? t("Change address") : t("Add an address"),
        () => show(addressForm()), true));
    if (!profile.canSendEmail) {
      part.append(state, element("p", { class: "hint" }, t("This service sends no e-mail, " +
        "so an address cannot be confirmed here. Ask an administrator.")));
      return part;
    }
    if (profile.emailPending) forms.append(codeForm(profile.emailPending));
    part.append(state, actions, forms, feedback("email"));
    return part;
  }

  async function sendCode(address) {
    const sent = await call("POST", "/email/code", { address });
    say("email", t("We sent a code to {address}.", { address: sent.address }));
    return sent;
  }

  function addressForm() {
    const field = element("input", { id: "new-email", type: "email", autocomplete: "email",
      required: "", "aria-describedby": "new-email-hint" });
    const form = element("form", { id: "email-form" },
      element("label", { for: "new-email" }, t("New e-mail address")),
      element("p", { id: "new-email-hint", class: "hint" }, t("We send a code there. Your " +
        "address changes when you enter it; until then the old one stays.")),
      field, element("button", { type: "submit" }, t("Send a code")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(async () => {
        const sent = await sendCode(field.value.trim());
        form.replaceWith(codeForm(sent));
        $("email-code").focus();
      }, "email");
    });
    return form;
  }

  function codeForm(pending) {
    const field = element("input", { id: "email-code", inputmode: "numeric",
      autocomplete: "one-time-code", required: "", "aria-describedby": "email-code-hint" });
    const form = element("form", { id: "email-code-form" },
      element("label", { for: "email-code" }, t("Code from the e-mail")),
      element("p", { id: "email-code-hint", class: "hint" }, t("Sent to {address}; it " +
        "works until {time}.", { address: pending.address,
        time: new Date(pending.expiresAt * 1000).toLocaleTimeString(
          document.documentElement.lang, { timeStyle: "short" }) })),
      field, element("p", { class: "actions" },
        element("button", { type: "submit" }, t("Confirm address")),
        button(t("Send a new code"), () => guarded(async () => {
          form.replaceWith(codeForm(await sendCode(pending.address)));
          $("email-code").focus();
        }, "email"), true)));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(async () => {
        const confirmed = await call("POST", "/email/confirm", { code: field.value.trim() });
        await render();
        say("email", t("{address} is confirmed.", { address: confirmed.address }));
      }, "email");
    });
    return form;
  }

  // --- devices: every browser session of the person ------------------------------------------

  function deviceName(device) {
    if (device.browser && device.system) {
      return t("{browser} on {system}", { browser: device.browser, system: device.system });
    }
    return device.browser || device.system || t("Unknown browser");
  }

  function devicesPart(devices) {
    const rows = devices.map((device) => [
      element("span", {}, deviceName(device), device.current
        ? element("span", { class: "tag" }, t("this device")) : null),
      whole(device.address), when(device.signedInAt), when(device.lastSeenAt),
      device.applications.map((app) => applicationName(app.clientId, app.name)).join(", ")
        || "—",
      device.current ? null : button(t("Sign out"), () => guarded(async () => {
        await call("DELETE", `/browser-sessions/${encodeURIComponent(device.id)}`);
        await render();
        say("devices", t("Signed out on {device}.", { device: deviceName(device) }));
      }, "devices"), true)]);
    const others = devices.filter((device) => !device.current).length;
    return element("div", {},
      table([t("Device"), t("From"), t("Since"), t("Last seen"), t("Applications"), t("Actions")], rows),
      element("p", { class: "actions" },
        others ? button(t("Sign out of all other devices"), () => guarded(async () => {
          const ended = await call("POST", "/sign-out", { scope: "others" });
          await render();
          say("devices", ended.ended ? t("Signed out on every other device.")
            : t("You were signed in on no other device."));
        }, "devices"), true) : null,
        button(t("Sign out everywhere"), () => guarded(async () => {
          await call("POST", "/sign-out", { scope: "everywhere" });
          // This browser's session has ended too: the logout clears its cookie and says so.
          const query = new URLSearchParams({ id_token_hint: idToken });
          window.location.assign(`${page.logoutUrl}?${query}`);
        }, "devices"), true)),
      feedback("devices"));
  }

  // An authenticator app (TOTP) for a password sign-in: the QR code and the secret as text,
  // active only once a first code from the app is typed back.
  function totpPart(profile) {
    const part = element("div", { id: "totp" });
    if (profile.totpEnrolled) {
      part.append(element("p", { id: "totp-state" }, t("Signing in with your password also " +
        "asks for a code from your authenticator app.")),
      element("p", { class: "actions" }, button(t("Remove the authenticator app"),
        () => guarded(async () => {
          if (!window.confirm(t("Remove the authenticator app?"))) return;
          await call("DELETE", "/totp");
          await render();
          say("totp", t("The authenticator app was removed."));
        }, "totp"), true)), feedback("totp"));
      return part;
    }
    const shown = element("div", {});
    part.append(element("p", {}, t("Add a code from an authenticator app to your password " +
      "sign-in.")), element("p", { class: "actions" }, button(t("Set up an authenticator app"),
      () => guarded(async () => {
        shown.replaceChildren(totpForm(await call("POST", "/totp", {})));
        $("totp-code").focus();
      }, "totp"), true)), feedback("totp"), shown);
    return part;
  }

  function totpForm(started) {
    const field = element("input", { id: "totp-code", inputmode: "numeric",
      autocomplete: "one-time-code", required: "", "aria-describedby": "totp-hint" });
    const form = element("form", { id: "totp-form" },
      element("p", { id: "totp-hint" }, t("Scan this code with your authenticator app, or " +
        "type the secret into it. Then enter the code the app shows.")),
      element("img", { id: "totp-qr", src: started.qrCode, alt: t("QR code for your " +
        "authenticator app"), width: "180", height: "180" }),
      element("p", {}, t("Secret:"), " ", element("code", { id: "totp-secret" },
        started.secret)),
      element("label", { for: "totp-code" }, t("Code from your authenticator app")), field,
      element("button", { type: "submit" }, t("Turn on")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(async () => {
        await call("POST", "/totp/confirm", { code: field.value.trim() });
        await render();
        say("totp", t("Your authenticator app is set up."));
      }, "totp");
    });
    return form;
  }

  // Codes for "Lost your passkey?": made here, shown once, each works once.
  function recoveryCodes(profile) {
    const shown = element("div", { id: "recovery-codes" });
    const make = button(profile.recoveryCodesLeft ? t("Make new recovery codes")
      : t("Make recovery codes"), () => guarded(async () => {
      const made = await call("POST", "/recovery-codes", {});
      shown.replaceChildren(
        element("p", {}, t("Keep these somewhere safe, apart from your devices. Each works " +
          "once. They are not shown again.")),
        element("ul", { class: "codes" }, ...made.recoveryCodes.map(
          (code) => element("li", {}, element("code", {}, code)))));
      say("recovery", profile.recoveryCodesLeft
        ? t("New recovery codes made; the old ones no longer work.")
        : t("Recovery codes made."));
    }, "recovery"), true);
    return element("div", {},
      element("p", {}, profile.recoveryCodesLeft
        ? t("You have {count} unused recovery codes.", { count: profile.recoveryCodesLeft })
        : t("With a recovery code you can get back in if you lose your passkeys.")),
      element("p", { class: "actions" }, make), feedback("recovery"), shown);
  }

  // --- the other device: a passkey from a one-time link --------------------------------------

  async function enrol() {
    const link = window.location.hash.slice(1);
    history.replaceState(null, "", window.location.pathname);  // the link leaves the URL
    if (!link) throw new Refused({ code: "enrolment_link_missing" }, 400);
    const started = await call("POST", "/enrol/start", { link }, false);
    content.replaceChildren(
      element("p", {}, t("Add a passkey for {username} on this device. A passkey lets you " +
        "sign in with your fingerprint, face or screen lock instead of a password.",
      { username: started.username })),
      button(t("Create a passkey"), () => guarded(async () => {
        const credential = await navigator.credentials.create(
          { publicKey: creationOptions(started.publicKeyCredentialCreationOptions) });
        await call("POST", "/enrol/finish", { link, sessionToken: started.sessionToken,
          publicKeyCredential: credentialJSON(credential) }, false);
        content.replaceChildren(element("p", { id: "done" },
          t("Your passkey is ready. You can sign in with it on this device.")),
        element("p", {}, element("a", { href: page.apiUrl.replace(/\/api$/, "") },
          t("Go to your account"))));
      })));
  }

  // --- /device: a device's sign-in (RFC 8628) ---------------------------------------------------

  function askForCode(typed) {
    const field = element("input", { id: "user-code", name: "user_code", autocomplete: "off",
      autocapitalize: "characters", spellcheck: "false", required: "",
      "aria-describedby": "user-code-help" });
    field.value = typed || "";
    const form = element("form", { id: "device-form" },
      element("label", { for: "user-code" }, t("Code shown on your device")),
      element("p", { id: "user-code-help", class: "status" },
        t("Eight letters, like BCDF-GHJK. You sign in next, then choose whether to allow " +
          "the device.")),
      field, element("button", { type: "submit" }, t("Continue")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(DEVICE_CODE, field.value.trim());
      guarded(async () => (accessToken ? deviceQuestion() : signIn()));
    });
    content.replaceChildren(form);
    field.focus();
  }

  async function deviceQuestion() {
    const userCode = sessionStorage.getItem(DEVICE_CODE) || "";
    if (!userCode) return askForCode("");
    let request;
    try {
      request = await call("GET", `/device?${new URLSearchParams({ userCode })}`);
    } catch (failure) {
      askForCode(userCode);
      throw failure;
    }
    const answer = (decision) => guarded(async () => {
      const decided = await call("POST", "/device", { userCode, decision });
      sessionStorage.removeItem(DEVICE_CODE);
      content.replaceChildren(element("p", { id: "done" }, decided.approved
        ? t("Done. {client} is signed in on your device. You can close this page.",
          { client: request.client })
        : decided.reason || t("You said no. The device was not signed in.")));
    });
    content.replaceChildren(...[
      element("p", { class: "status" }, t("Signed in as {username}",
        { username: request.signedInAs })),
      element("p", {}, t("Sign in to {client} on your device?", { client: request.client })),
      element("p", {}, t("Only allow this if your device shows the code {code}.",
        { code: request.userCode })),
      element("ul", {}, ...request.scopes.map((scope) => element("li", {},
        t(scope.description)))),
      request.resources.length ? element("p", {}, t("For use at: {resources}",
        { resources: request.resources.join(", ") })) : null,
      element("p", { class: "actions" }, button(t("Allow"), () => answer("allow")),
        button(t("Deny"), () => answer("deny"), true))].filter(Boolean));
    return undefined;
  }

  async function start() {
    try {
      if (page.mode === "enrol") return await enrol();
      const params = new URLSearchParams(window.location.search);
      if (!params.get("code") && !params.get("error")) {
        return page.mode === "device"
          ? askForCode(params.get("user_code") || sessionStorage.getItem(DEVICE_CODE))
          : await signIn();
      }
      const pending = returned();
      if (params.get("error")) {
        throw new Refused({ message: params.get("error_description") ||
          t("The sign-in did not complete.") }, 400);
      }
      const tokens = await redeem(params, pending);
      accessToken = tokens.access_token;
      idToken = tokens.id_token || "";
      await (page.mode === "device" ? deviceQuestion() : render());
      $("heading").focus();
    } catch (failure) {
      showError(page.mode === "enrol" && failure.code === "invalid_token"
        ? t("This link has expired or is incomplete. Ask for a new one: on your account " +
          "page if you made it, or from the person who invited you.")
        : messageFor(failure));
    }
    return undefined;
  }

  // The link opened again in this tab changes only the fragment: no new page, so run again.
  if (page.mode === "enrol") window.addEventListener("hashchange", start);
  start();
})();
