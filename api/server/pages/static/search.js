// Suggestions as a query is typed, for every search box with data-suggest (its URL).
// Progressive enhancement: without this script the form is a plain GET to /search.
// Text is set with textContent only, never parsed as HTML.
(function () {
  "use strict";
  var WAIT_MS = 150;
  var MIN_CHARS = 2;

  function attach(input, number) {
    var url = input.getAttribute("data-suggest");
    var list = document.createElement("ul");
    var timer = null;
    var asked = 0;
    var active = -1;
    list.id = "suggestions-" + number;
    list.className = "suggestions";
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "Suggestions");
    list.hidden = true;
    input.parentNode.insertBefore(list, input.nextSibling);
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("autocomplete", "off");

    function options() {
      return list.querySelectorAll("a");
    }

    function close() {
      list.hidden = true;
      active = -1;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }

    function highlight(index) {
      var found = options();
      for (var i = 0; i < found.length; i++) {
        found[i].setAttribute("aria-selected", i === index ? "true" : "false");
      }
      active = index;
      if (index >= 0 && index < found.length) {
        input.setAttribute("aria-activedescendant", found[index].id);
      }
    }

    function show(reply, query) {
      if (input.value.trim() !== query) {
        return; // typed on since: a newer answer is coming
      }
      while (list.firstChild) {
        list.removeChild(list.firstChild);
      }
      reply.suggestions.forEach(function (s, i) {
        var item = document.createElement("li");
        var link = document.createElement("a");
        var kind = document.createElement("span");
        item.setAttribute("role", "presentation");
        link.id = list.id + "-" + i;
        link.href = s.href;
        link.setAttribute("role", "option");
        kind.className = "kind";
        kind.textContent = s.kind;
        link.appendChild(kind);
        link.appendChild(document.createTextNode(" " + s.text));
        if (s.detail) {
          var detail = document.createElement("span");
          detail.className = "muted";
          detail.textContent = " · " + s.detail;
          link.appendChild(detail);
        }
        item.appendChild(link);
        list.appendChild(item);
      });
      list.hidden = reply.suggestions.length === 0;
      input.setAttribute("aria-expanded", list.hidden ? "false" : "true");
      active = -1;
    }

    function ask() {
      var query = input.value.trim();
      if (query.length < MIN_CHARS) {
        close();
        return;
      }
      var mine = ++asked;
      fetch(url + "?q=" + encodeURIComponent(query), { headers: { Accept: "application/json" } })
        .then(function (response) {
          return response.ok ? response.json() : null;
        })
        .then(function (reply) {
          if (reply && mine === asked) {
            show(reply, query);
          }
        })
        .catch(function () {
          close(); // suggestions are a convenience: the form still searches
        });
    }

    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(ask, WAIT_MS);
    });
    input.addEventListener("keydown", function (event) {
      var found = options();
      if (list.hidden || found.length === 0) {
        return;
      }
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        var step = event.key === "ArrowDown" ? 1 : -1;
        highlight((active + step + found.length) % found.length);
      } else if (event.key === "Enter" && active >= 0) {
        event.preventDefault();
        window.location.href = found[active].href;
      } else if (event.key === "Escape") {
        close();
      }
    });
    input.addEventListener("blur", function () {
      // Late enough for a click on a suggestion to follow its link first.
      setTimeout(close, 200);
    });
  }

  var inputs = document.querySelectorAll("input[data-suggest]");
  for (var i = 0; i < inputs.length; i++) {
    attach(inputs[i], i);
  }
})();
