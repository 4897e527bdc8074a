// Package all imports every step family, registering each built-in step
// type. It is the one list of built-ins: a new family (nks, notice,
// easymaker, ...) is added here as a blank import, and nothing else in the
// code base switches on step type names.
package all

import (
	_ "github.com/runbook/runbook/internal/steps/core"   // log, set, sleep, fail, http.request, shell, approval, playbook
	_ "github.com/runbook/runbook/internal/steps/nks"    // nks.cluster.*, nks.nodegroup.*, nks.task.*, nks.supports
	_ "github.com/runbook/runbook/internal/steps/notice" // notice.categories, .tags, .list, .get, .attachment, .digest
)

import _ "github.com/runbook/runbook/internal/steps/objectstorage"

import _ "github.com/runbook/runbook/internal/steps/logncrash"

import _ "github.com/runbook/runbook/internal/steps/easymaker"

import _ "github.com/runbook/runbook/internal/steps/network" // network.list, .subnets, .external, image.find

import _ "github.com/runbook/runbook/internal/steps/notify" // notify (a message to a channel of the config)

import _ "github.com/runbook/runbook/internal/steps/ssh" // ssh (a command on a host of the inventory)
