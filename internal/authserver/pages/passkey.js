(function () {
  "use strict";
  var forms = document.querySelectorAll("form[data-passkey]");
  var supported = window.PublicKeyCredential && PublicKeyCredential.parseRequestOptionsFromJSON &&
    PublicKeyCredential.parseCreationOptionsFromJSON;
  forms.forEach(function (form) {
    var section = form.closest("[data-passkey-section]") || form;
    var button = form.querySelector("button");
    var status = form.querySelector("[role=status]");
    if (!supported) {
      if (form.dataset.passkey === "create") {
        section.hidden = false;
        button.disabled = true;
        status.textContent = "This browser cannot create passkeys.";
      }
      return;
    }
    section.hidden = false;
    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      button.disabled = true;
      status.textContent = "Waiting for your passkey\u2026";
      try {
        var options = JSON.parse(form.dataset.options).publicKey;
        var credential = form.dataset.passkey === "create"
          ? await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) })
          : await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
        form.elements.credential.value = JSON.stringify(credential.toJSON());
        form.submit();
      } catch (err) {
        status.textContent = err && err.name === "NotAllowedError"
          ? "Cancelled, or no passkey for this site on this device."
          : "The passkey did not work: " + (err && err.message);
        button.disabled = false;
      }
    });
  });
})();
