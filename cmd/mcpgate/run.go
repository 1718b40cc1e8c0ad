package main

import "github.com/mcpgate/mcpgate/internal/gateway"

// runGateway runs the gateway until its context is done. Tests replace it
// to see what serve would run, without starting anything.
var runGateway = gateway.Run
