package model

// ReasonIdleTimeout ends an interactive allocation that had no step
// running for the site's interactive idle timeout.
const ReasonIdleTimeout = "IdleTimeout"
