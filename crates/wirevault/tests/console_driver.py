#!/usr/bin/python3
"""Drives the wirevault web console in headless Chromium (Selenium) for
crates/wirevault/tests/console.rs, and prints what it saw as one JSON
object on stdout. It judges nothing itself: the Rust test compares the
figures with stats.json, `wirevault query` and tshark.

Usage: console_driver.py SPEC.json, where SPEC holds
  url          the console's address
  mode         "live": watch the live panel while traffic flows;
               "query": fill in the query panel, read the count and the
               packet table, download the pcap, then try a bad filter;
               "token": give a wrong then the right token, count, download;
               "hosts": load each of "urls" and say what it shows;
               "flows": type a filter, read the flow table, download the
               first flow's packets by its link;
               "fleet": read the node table of a fleet server, type a
               range and filter, read the count and its note, download
  urls         (hosts) the addresses to load, in order
  resolver_rules  Chromium's --host-resolver-rules (e.g. to make a name
               resolve to 127.0.0.1, as a DNS rebinding page does)
  screenshot   where to save a PNG of the page
  downloads    (query, token, flows) the download directory
  min_points   (live) wait until the rate chart has this many points
  samples      (live) how many pps figures to read, one a second
  from, to, filter, bad_filter   (query) what to type
  token, wrong_token, filter     (token) what to type
  timeout      seconds any one wait may take

The output always has "log" (the browser console's entries) and "error"
(null, or why the driver could not finish); in "query" mode "log" ends
before the bad filter is typed and "log_after" holds the rest.
"""

import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def browser(spec):
    opts = webdriver.ChromeOptions()
    opts.binary_location = spec.get("chromium", "/usr/bin/chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1600,1300", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update"):
        opts.add_argument(a)
    if spec.get("resolver_rules"):
        opts.add_argument("--host-resolver-rules=" + spec["resolver_rules"])
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if spec.get("downloads"):
        opts.add_experimental_option("prefs", {
            "download.default_directory": spec["downloads"],
            "download.prompt_for_download": False,
            "safebrowsing.enabled": False,
        })
    svc = Service(spec.get("chromedriver", "/usr/bin/chromedriver"))
    d = webdriver.Chrome(service=svc, options=opts)
    if spec.get("downloads"):
        d.execute_cdp_cmd("Browser.setDownloadBehavior",
                          {"behavior": "allow", "downloadPath": spec["downloads"], "eventsEnabled": True})
    return d


def wait(what, cond, timeout):
    end = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > end:
            raise TimeoutError("timed out waiting for " + what)
        time.sleep(0.1)


def attr(d, elem_id, name):
    return d.find_element(By.ID, elem_id).get_attribute(name) or ""


def text(d, elem_id):
    return d.find_element(By.ID, elem_id).text


def live(d, spec, out):
    t = spec.get("timeout", 60)
    d.get(spec["url"])
    wait("the page to show a pps figure", lambda: attr(d, "f-pps", "data-value"), t)
    need = spec.get("min_points", 10)
    wait("%d points on the rate chart" % need, lambda: int(attr(d, "c-pps", "data-points") or 0) >= need, t)
    samples = []
    for _ in range(spec.get("samples", 5)):
        samples.append({"value": float(attr(d, "f-pps", "data-value") or "nan"), "shown": text(d, "f-pps")})
        time.sleep(1)
    out["pps"] = samples
    out["points"] = int(attr(d, "c-pps", "data-points") or 0)
    out["badge"] = text(d, "state")
    out["balance"] = text(d, "balance")


def download(d, spec, timeout, css="#q-download"):
    """Clicks the link `css` (the query panel's download); the path of the finished file."""
    before = set(os.listdir(spec["downloads"]))
    d.find_element(By.CSS_SELECTOR, css).click()

    def done():
        now = [f for f in os.listdir(spec["downloads"]) if f not in before]
        if now and not any(f.endswith(".crdownload") for f in now):
            return now
        return None

    return os.path.join(spec["downloads"], wait("the download", done, timeout)[0])


def typed(d, elem_id, value):
    e = d.find_element(By.ID, elem_id)
    e.clear()
    e.send_keys(value)


def query(d, spec, out):
    t = spec.get("timeout", 60)
    d.get(spec["url"])
    wait("the status to load", lambda: text(d, "state") not in ("connecting", ""), t)
    wait("the stored traffic chart", lambda: int(attr(d, "c-hist", "data-points") or 0) > 0, t)
    typed(d, "q-from", spec.get("from", ""))
    typed(d, "q-to", spec.get("to", ""))
    typed(d, "q-filter", spec.get("filter", ""))
    # The count and the table shown must answer what was typed (the page
    # marks each with the parameters it answers); the download link
    # carries the same parameters.
    asked = d.execute_script("return queryParams().toString()")
    out["asked"] = asked
    wait("the count", lambda: attr(d, "q-count", "data-for") == asked, t)
    out["count"] = int(attr(d, "q-count", "data-count"))
    out["count_text"] = text(d, "q-count")
    out["download_href"] = attr(d, "q-download", "href")
    wait("the packet table", lambda: attr(d, "packets", "data-for") == asked, t)
    rows = []
    for tr in d.find_elements(By.CSS_SELECTOR, "#packets tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        time_cell = tr.find_elements(By.TAG_NAME, "td")[1].get_attribute("data-time")
        rows.append({"time": time_cell, "cells": cells})
    out["rows"] = rows
    d.save_screenshot(spec["screenshot"])
    out["download"] = download(d, spec, t)
    # What the console logged up to here must be clean; the bad filter's
    # 400 is logged by the browser itself and is reported apart.
    out["log"] = d.get_log("browser")
    out["log_checked"] = True
    typed(d, "q-filter", spec["bad_filter"])
    asked = d.execute_script("return queryParams().toString()")
    wait("the filter error", lambda: attr(d, "q-count", "data-for") == asked, t)
    out["bad_filter_error"] = text(d, "q-error")
    out["bad_filter_marked"] = "bad" in attr(d, "q-filter", "class")


def token(d, spec, out):
    """A server with --token-file: the page asks for a token, refuses a
    wrong one, and with the right one loads and downloads (the link is
    authorised by the wv_token cookie)."""
    t = spec.get("timeout", 60)
    d.get(spec["url"])
    wait("the token field", lambda: d.find_element(By.ID, "auth").is_displayed(), t)
    out["asked_for_token"] = text(d, "auth-msg")
    typed(d, "token", spec["wrong_token"])
    d.find_element(By.CSS_SELECTOR, "#auth button").click()
    wait("the wrong token's refusal", lambda: "not accepted" in text(d, "auth-msg"), t)
    out["refused"] = text(d, "auth-msg")
    typed(d, "token", spec["token"])
    d.find_element(By.CSS_SELECTOR, "#auth button").click()
    wait("the status with the token", lambda: "rest" in attr(d, "state", "class"), t)
    out["form_hidden"] = not d.find_element(By.ID, "auth").is_displayed()
    typed(d, "q-from", "")
    typed(d, "q-to", "")
    typed(d, "q-filter", spec["filter"])
    asked = d.execute_script("return queryParams().toString()")
    wait("the count", lambda: attr(d, "q-count", "data-for") == asked, t)
    out["count"] = int(attr(d, "q-count", "data-count") or -1)
    cookie = d.get_cookie("wv_token")
    out["cookie"] = cookie and {"value": cookie["value"], "sameSite": cookie.get("sameSite")}
    out["download"] = download(d, spec, t)
    d.save_screenshot(spec["screenshot"])


def flows(d, spec, out):
    """The flow table for a filter: its rows, its note, each row's packets link; then the
    first row's link clicked (the download's path)."""
    t = spec.get("timeout", 60)
    d.get(spec["url"])
    wait("the status to load", lambda: text(d, "state") not in ("connecting", ""), t)
    typed(d, "q-filter", spec.get("filter", ""))
    asked = d.execute_script("return queryParams().toString()")
    wait("the flow table", lambda: attr(d, "flow-table", "data-for") == asked, t)
    rows = []
    for tr in d.find_elements(By.CSS_SELECTOR, "#flow-table tbody tr"):
        tds = tr.find_elements(By.TAG_NAME, "td")
        link = tds[-1].find_element(By.TAG_NAME, "a").get_attribute("href")
        rows.append({"cells": [td.text for td in tds[:-1]], "packets": link})
    out["rows"] = rows
    out["note"] = text(d, "f-note")
    d.execute_script("document.getElementById('flows').scrollIntoView()")
    d.save_screenshot(spec["screenshot"])
    if rows:
        out["download"] = download(d, spec, t, "#flow-table tbody tr a.flow-packets")
    out["log"] = d.get_log("browser")
    out["log_checked"] = True


def fleet(d, spec, out):
    """A fleet server's page: the node table's rows (node, state, cells), then the count and
    the note for what was typed, then the download."""
    t = spec.get("timeout", 60)
    d.get(spec["url"])
    wait("the node table", lambda: attr(d, "fleet-table", "data-loaded"), t)
    rows = []
    for tr in d.find_elements(By.CSS_SELECTOR, "#fleet-table tbody tr"):
        rows.append({"node": tr.get_attribute("data-node"), "state": tr.get_attribute("data-state"),
                     "cells": [td.text for td in tr.find_elements(By.TAG_NAME, "td")]})
    out["rows"] = rows
    out["badge"] = text(d, "state")
    out["hidden"] = [i for i in ("live", "store-panel", "traffic", "flows")
                     if d.find_element(By.ID, i).get_attribute("hidden") is not None]
    typed(d, "q-from", spec.get("from", ""))
    typed(d, "q-to", spec.get("to", ""))
    typed(d, "q-filter", spec.get("filter", ""))
    asked = d.execute_script("return queryParams().toString()")
    wait("the count", lambda: attr(d, "q-count", "data-for") == asked, t)
    out["count"] = int(attr(d, "q-count", "data-count"))
    out["note"] = text(d, "q-error")
    d.save_screenshot(spec["screenshot"])
    out["download"] = download(d, spec, t)
    out["log"] = d.get_log("browser")
    out["log_checked"] = True


def hosts(d, spec, out):
    """Loads each URL: the console's state badge once the status loaded,
    or the text of a page that is not the console (an error answer)."""
    t = spec.get("timeout", 60)
    pages = []
    for url in spec["urls"]:
        d.get(url)
        badge = d.find_elements(By.ID, "state")
        state = None
        if badge:
            wait("the status from " + url, lambda: text(d, "state") not in ("connecting", ""), t)
            state = text(d, "state")
        pages.append({"url": url, "state": state, "body": d.find_element(By.TAG_NAME, "body").text[:600]})
    out["pages"] = pages
    d.save_screenshot(spec["screenshot"])


def main():
    spec = json.load(open(sys.argv[1]))
    out = {"error": None, "log": []}
    d = None
    try:
        d = browser(spec)
        if spec["mode"] == "live":
            live(d, spec, out)
            d.save_screenshot(spec["screenshot"])
        elif spec["mode"] == "token":
            token(d, spec, out)
        elif spec["mode"] == "hosts":
            hosts(d, spec, out)
        elif spec["mode"] == "flows":
            flows(d, spec, out)
        elif spec["mode"] == "fleet":
            fleet(d, spec, out)
        else:
            query(d, spec, out)
    except Exception as e:  # reported to the test, which fails with it
        out["error"] = "%s: %s" % (type(e).__name__, e)
        if d is not None:
            try:
                d.save_screenshot(spec["screenshot"])
            except Exception:
                pass
    finally:
        if d is not None:
            try:
                rest = d.get_log("browser")
                out["log_after" if out.pop("log_checked", False) else "log"] = rest
            except Exception:
                pass
            d.quit()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
