from robot_mcp_memory.cli import main

raise SystemExit(main())
