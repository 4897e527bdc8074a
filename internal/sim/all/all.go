// Package all blank-imports every simulated service: the one list of
// simulators `runbook sim` and `runbook run --sim` start. Add a service here.
package all

import _ "github.com/runbook/runbook/internal/sim/helpcenter"

import _ "github.com/runbook/runbook/internal/sim/identity"

import _ "github.com/runbook/runbook/internal/sim/nks"

import _ "github.com/runbook/runbook/internal/sim/easymaker"

import _ "github.com/runbook/runbook/internal/sim/objectstorage"

import _ "github.com/runbook/runbook/internal/sim/logncrash"

import _ "github.com/runbook/runbook/internal/sim/network"
