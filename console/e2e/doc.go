// Package e2e tests the operator's console (package console) in a real
// browser: headless Chromium, driven with chromedp, against the real
// PostgreSQL and a relay. A module of its own so that chromedp stays out of
// the core's go.mod (docs/modules.md). Never imported.
package e2e
