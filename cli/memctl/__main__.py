from memctl.app import main

main()
