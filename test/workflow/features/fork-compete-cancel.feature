Feature: Fork Compete Releases The Losers' Child Operations
  As a convoke workflow author
  I want the losing branches of a competing fork to let go of the contract operations they started
  So that work nobody waits for is cancelled where the contract allows it, and recorded either way

  # The deployment's contract has two interactions: 'review' declares caller cancellation, 'hold' does not.
  # Its peers answer only when cancelled, or after a few seconds.
  Scenario: Losing Child Operations Are Cancelled Or Detached
    Given a contract deployment where review declares caller cancellation and hold does not
    And a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: compete-cancel
      version: '1.0.0'
    do:
      - race:
          fork:
            compete: true
            branches:
              - quick:
                  do:
                    - pause:
                        wait:
                          milliseconds: 600
                    - answer:
                        set:
                          winner: quick
              - cancellable:
                  call: invoke-contract
                  with:
                    contract: { id: lab.review, version: '1.0.0', digest: '<digest>' }
                    interaction: review
                    input: { document: a }
              - uncancellable:
                  call: invoke-contract
                  with:
                    contract: { id: lab.review, version: '1.0.0', digest: '<digest>' }
                    interaction: hold
                    input: { document: b }
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    winner: quick
    """
    And the child operation of cancellable should be cancelled
    And the child operation of uncancellable should be detached
    And the child dispositions should be recorded before the fork completed
