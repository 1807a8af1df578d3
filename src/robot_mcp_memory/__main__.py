from robot_mcp_memory.surfaces.cli import main

raise SystemExit(main())
