package main

// runGateway runs the gateway until its context is done, with the reload
// options serve put in it (reload.go). Tests replace it to see what serve
// would run, without starting anything.
var runGateway = runWithReload
