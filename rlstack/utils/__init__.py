"""Framework-free helpers: schedules, observation filters, seeding, timers, imports."""
